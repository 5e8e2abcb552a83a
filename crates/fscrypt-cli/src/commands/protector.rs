//! `fscrypt-rs protector list|add|remove|reseal CIPHERDIR`: the protectors
//! of a vault (passphrases, key files, recovery keys, and sealed ones: TPM2,
//! PKCS#11 tokens, FIDO2 keys, age recipients; any number of each, each
//! with a name). Adding or removing one rewrites only the config
//! (atomically, under the config lock): the master key, and so every file,
//! stays the same. Logic: `fscrypt_vault::edit`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use clap::ValueEnum;
use fscrypt_crypto::SecretBuf;
use fscrypt_vault::config::{ProtectorRecord, format_utc};
use fscrypt_vault::{Argon2Params, NewSecret, RecoveryKey, Vault};

use crate::support::seal::{self, SealArgs};
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
    /// creation time, last use on this machine, and for sealed ones the
    /// device (TPM and PCRs, token, security key, age recipients). Needs
    /// no secret and shows none.
    List(ListArgs),
    /// Add a protector. Unlocks the vault first with an existing protector
    /// (a passphrase by default, from the terminal, stdin, --passfile or
    /// --extpass; or --key-file / --recovery-key), then wraps the same
    /// master key with the new secret.
    Add(AddArgs),
    /// Remove a protector. Unlocks the vault first with a protector that
    /// stays, so the vault is known to open afterwards; the last
    /// protector is never removed, the last passphrase, key file or
    /// recovery key only with --force.
    Remove(RemoveArgs),
    /// Seal a tpm2 protector again to the TPM's current PCR values (after
    /// a firmware or boot change refused it), with a new secret; unlock
    /// with another protector (e.g. --recovery-key) first.
    Reseal(ResealArgs),
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
    /// Sealed to this machine's TPM2 under a PCR policy: --tcti, --pcrs,
    /// --pin.
    Tpm2,
    /// Wrapped by a key on a PKCS#11 token: --module, --token, --pin-file.
    Pkcs11,
    /// Released by a FIDO2 security key (hmac-secret): --device.
    Fido2,
    /// An age file to X25519 recipients: --recipient, --recipients-file
    /// (only the public keys are needed).
    Age,
}

impl Kind {
    /// The sealed kind, for the kinds `fscrypt_seal` makes.
    fn sealed(self) -> Option<fscrypt_seal::Kind> {
        match self {
            Kind::Tpm2 => Some(fscrypt_seal::Kind::Tpm2),
            Kind::Pkcs11 => Some(fscrypt_seal::Kind::Pkcs11),
            Kind::Fido2 => Some(fscrypt_seal::Kind::Fido2),
            Kind::Age => Some(fscrypt_seal::Kind::Age),
            Kind::Passphrase | Kind::KeyFile | Kind::RecoveryKey => None,
        }
    }
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
    /// For tpm2 and age: how to seal (the device flags --tcti, --module,
    /// --token, --pin-file, --device are with the unlock options).
    #[command(flatten)]
    seal: SealArgs,
    #[command(flatten)]
    unlock: Unlock,
}

#[derive(clap::Args, Debug)]
struct ResealArgs {
    /// The vault (directory made by `fscrypt-rs init`).
    cipherdir: PathBuf,
    /// The name of the tpm2 protector to seal again.
    name: String,
    /// Seal to these PCRs instead of the ones it had; --pin / --tcti as
    /// for `protector add` (default: as it was).
    #[command(flatten)]
    seal: SealArgs,
    #[command(flatten)]
    unlock: Unlock,
}

#[derive(clap::Args, Debug)]
struct RemoveArgs {
    /// The vault (directory made by `fscrypt-rs init`).
    cipherdir: PathBuf,
    /// The name of the protector to remove (`fscrypt-rs protector list`).
    name: String,
    /// Remove it even if it is the last passphrase, key-file or
    /// recovery-key protector, so that only protectors bound to a device
    /// or an identity remain (a lost device or a TPM firmware update then
    /// locks the data away).
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    unlock: Unlock,
}

/// Runs `fscrypt-rs protector`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Sub::List(a) => list(a),
        Sub::Add(a) => add(a),
        Sub::Remove(a) => remove(a),
        Sub::Reseal(a) => reseal(a),
    }
}

fn list(args: ListArgs) -> anyhow::Result<ExitCode> {
    let vault = args.config.open(&args.cipherdir)?;
    let used = fscrypt_vault::usage::last_use(&vault.key_identifier());
    let rows: Vec<[String; 6]> = vault
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
                used.get(&p.name)
                    .map_or_else(|| "-".to_owned(), |t| format_utc(*t)),
                seal::describe(p),
            ]
        })
        .collect();
    let header = ["NAME", "KIND", "KDF", "CREATED", "LAST USED HERE", "DEVICE"].map(str::to_owned);
    let mut width = [0usize; 5];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        println!(
            "{:w0$}  {:w1$}  {:w2$}  {:w3$}  {:w4$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            row[5],
            w0 = width[0],
            w1 = width[1],
            w2 = width[2],
            w3 = width[3],
            w4 = width[4]
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
    // Refuse flags of another kind before asking for any secret.
    let seal_options = match args.kind.sealed() {
        Some(kind) => Some(args.seal.options(kind, &args.unlock.secret.device)?),
        None if args.seal != SealArgs::default() => {
            bail!(
                "--pcrs, --pin, --recipient and --recipients-file are for sealed protectors (tpm2, age)"
            )
        }
        None => None,
    };
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
        Kind::Tpm2 | Kind::Pkcs11 | Kind::Fido2 | Kind::Age => {
            let options = seal_options.expect("a sealed kind has seal options");
            let (n, _) = add_sealed(&vault, &master, &options, &args.unlock, name)?;
            (n, None)
        }
    };
    let kind = args
        .kind
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default();
    println!("Added {kind} protector {added:?} to {dir}; the data is unchanged.");
    if let Some(path) = args.add_key_file.as_ref().or(args.new_key_file.as_ref()) {
        println!("  key file: {}", path.display());
    }
    if let Some(rk) = &shown_key {
        secret::show_recovery_key(rk);
    }
    Ok(ExitCode::SUCCESS)
}

/// Seals a new random secret as `options` say and adds it as a protector
/// of `master`; returns its name and the vault as now stored.
fn add_sealed(
    vault: &Vault,
    master: &SecretBuf,
    options: &fscrypt_seal::SealOptions,
    unlock: &Unlock,
    name: Option<&str>,
) -> anyhow::Result<(String, Vault)> {
    let mut ui = seal::Prompter::new(
        unlock.secret.device.pin_file.as_deref(),
        unlock.secret.pass.extpass.as_deref(),
    );
    let (secret, sealed) = seal::seal_new(options, &mut ui)?;
    let record = sealed.to_json();
    let new = NewSecret::Sealed {
        kind: seal::vault_kind(options.kind()),
        sealed: &record,
        secret: secret.as_bytes(),
    };
    let (vault, name) = vault.add_protector(master, &new, name)?;
    Ok((name, vault))
}

fn reseal(args: ResealArgs) -> anyhow::Result<ExitCode> {
    let vault = args.unlock.config.open(&args.cipherdir)?;
    let Some(target) = vault.protectors().iter().position(|p| p.name == args.name) else {
        return Err(fscrypt_vault::Error::UnknownProtector(args.name.clone()).into());
    };
    let old = match seal::record_of(&vault.protectors()[target])? {
        Some(s @ fscrypt_seal::Sealed::Tpm2(_)) => s,
        _ => bail!(
            "{:?} is not a tpm2 protector: only TPM2 protectors depend on PCRs; for other kinds remove it and add a new one",
            args.name
        ),
    };
    let options = old
        .reseal_options(
            &args.seal.pcrs,
            args.seal.pin,
            args.unlock.secret.device.tcti.as_deref(),
        )
        .expect("a tpm2 record has reseal options");
    let (master, _) = match unlock(&vault, &args.unlock)? {
        Ok(found) => found,
        Err(code) => return Ok(code),
    };
    let mut ui = seal::Prompter::new(
        args.unlock.secret.device.pin_file.as_deref(),
        args.unlock.secret.pass.extpass.as_deref(),
    );
    let (secret, sealed) = seal::seal_new(&options, &mut ui)?;
    let record = sealed.to_json();
    vault.replace_sealed(
        target,
        &master,
        &NewSecret::Sealed {
            kind: fscrypt_vault::ProtectorKind::Tpm2,
            sealed: &record,
            secret: secret.as_bytes(),
        },
    )?;
    println!(
        "Sealed protector {:?} again to the current PCRs ({}); the data is unchanged.",
        args.name,
        seal::describe_sealed(&sealed)
    );
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
    if !args.force && vault.is_last_standalone(target) {
        return Err(fscrypt_vault::Error::LastStandalone(args.name.clone()).into());
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
    vault.remove_protector(&args.name, args.force)?;
    println!(
        "Removed protector {:?} from {dir}; it no longer unlocks the vault. The data is unchanged.",
        args.name
    );
    Ok(ExitCode::SUCCESS)
}
