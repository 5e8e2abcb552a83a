//! The options every vault command shares: where the vault's config is
//! ([`ConfigArg`], `--config FILE`) and how to unlock it ([`UnlockArgs`]:
//! `--passfile`, `--extpass`, `--key-file`, `--recovery-key`, or a
//! passphrase from the terminal or stdin), and the one function that turns
//! them into the master key ([`UnlockArgs::unwrap`]).
//!
//! Every command that opens a vault flattens [`ConfigArg`] (`mount`,
//! `fsck`, `passwd`, `protector list|add|remove`, `info`); every command
//! that unlocks one flattens [`UnlockArgs`] too (`mount`, `fsck`,
//! `passwd`, `protector add|remove`), so the same secret options work
//! everywhere and clap never answers one of them with "unexpected
//! argument" (and its misleading "tip: use '-- --passfile'"). Secrets never
//! travel on the command line: a file, a command's output, the terminal or
//! stdin ([`secret`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;
use fscrypt_crypto::SecretBuf;
use fscrypt_vault::{Secret, Vault};

use crate::support::{seal, secret};

/// `--config FILE`: where the vault's config (its policy and wrapped
/// keys) is, when it is not in the cipher directory.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigArg {
    /// The vault's config file (policy and wrapped keys), when it is kept
    /// outside CIPHERDIR, as `fscrypt-rs init --config FILE` wrote it (so
    /// that a synced CIPHERDIR never holds the wrapped key; gocryptfs
    /// -config). Default: the fscrypt.vault.json in CIPHERDIR. Changes
    /// (passwd, protector add/remove) rewrite this file, atomically.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl ConfigArg {
    /// Opens the vault in `cipherdir` with its config from `--config`, or
    /// from `cipherdir` ([`Vault::open_with`]).
    ///
    /// # Errors
    /// As [`Vault::open_with`]: no config (one line naming `--config`), a
    /// bad config, I/O errors.
    pub fn open(&self, cipherdir: &Path) -> anyhow::Result<Vault> {
        Ok(Vault::open_with(cipherdir, self.config.as_deref())?)
    }

    /// The `--config` path made absolute (against the current directory),
    /// for a process that runs elsewhere (the mount daemon).
    ///
    /// # Errors
    /// The current directory cannot be read.
    pub fn absolute(&self) -> anyhow::Result<Option<PathBuf>> {
        Ok(match &self.config {
            Some(c) if c.is_relative() => Some(std::env::current_dir()?.join(c)),
            other => other.clone(),
        })
    }
}

/// How to unlock a vault: the existing secret. At most one of
/// `--key-file`, `--recovery-key` and a passphrase source (`--passfile`,
/// `--extpass`); none: a passphrase from the terminal (no echo) or one
/// line of stdin.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct UnlockArgs {
    /// Unlock with this key file (32 or 64 raw bytes) instead of a
    /// passphrase.
    #[arg(
        long,
        value_name = "FILE",
        alias = "unlock-key-file",
        conflicts_with_all = ["passfile", "extpass", "recovery_key"]
    )]
    pub key_file: Option<PathBuf>,
    /// Unlock with the recovery key shown at `init` (typed without echo,
    /// or one line on stdin; case, spaces and dashes do not matter).
    #[arg(
        long,
        alias = "unlock-recovery-key",
        conflicts_with_all = ["passfile", "extpass"]
    )]
    pub recovery_key: bool,
    /// Where the unlocking passphrase comes from (default: the terminal,
    /// or one line from stdin when it is not a terminal).
    #[command(flatten)]
    pub pass: secret::PassSource,
    /// Unlock with a TPM2 protector (each tpm2 protector is tried; its PIN,
    /// if it has one, from --pin-file, --extpass or the terminal).
    #[arg(long, conflicts_with_all = ["key_file", "recovery_key", "passfile", "pkcs11", "fido2", "age_identity"])]
    pub tpm2: bool,
    /// Unlock with a PKCS#11 token protector (PIN from --pin-file,
    /// --extpass or the terminal).
    #[arg(long, conflicts_with_all = ["key_file", "recovery_key", "passfile", "fido2", "age_identity"])]
    pub pkcs11: bool,
    /// Unlock with a FIDO2 security key protector (touch it when asked).
    #[arg(long, conflicts_with_all = ["key_file", "recovery_key", "passfile", "age_identity"])]
    pub fido2: bool,
    /// Unlock with an age protector, with this identity file (as
    /// `age-keygen` writes it).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["key_file", "recovery_key", "passfile"])]
    pub age_identity: Option<PathBuf>,
    /// Where the device is (defaults: what the protector remembers).
    #[command(flatten)]
    pub device: seal::DeviceArgs,
}

impl UnlockArgs {
    /// The sealed kind chosen by `--tpm2`, `--pkcs11`, `--fido2` or
    /// `--age-identity`, if any.
    pub fn sealed_kind(&self) -> Option<fscrypt_seal::Kind> {
        use fscrypt_seal::Kind;
        [
            (self.tpm2, Kind::Tpm2),
            (self.pkcs11, Kind::Pkcs11),
            (self.fido2, Kind::Fido2),
            (self.age_identity.is_some(), Kind::Age),
        ]
        .into_iter()
        .find_map(|(on, kind)| on.then_some(kind))
    }

    /// Unwraps `vault`'s master key with the secret these options name:
    /// the key file, the recovery key (read from the terminal or stdin),
    /// or the passphrase from `--passfile`, `--extpass`, the terminal
    /// (asked with `prompt`) or stdin. Only the protector named `only` is
    /// tried when given. A slow passphrase derivation is announced first.
    /// Returns the raw master key (identifier checked) and the index of
    /// the protector that opened it, or, for a wrong secret, its one-line
    /// message printed and exit code [`secret::EXIT_WRONG_SECRET`].
    ///
    /// `otherwise` completes the message for a vault without a passphrase
    /// protector when no secret option was given (e.g. "or mount it
    /// --locked").
    ///
    /// # Errors
    /// Unreadable key file or passphrase source, no passphrase protector
    /// (when a passphrase is the secret), and the vault's errors other
    /// than a wrong secret.
    pub fn unwrap(
        &self,
        vault: &Vault,
        only: Option<&str>,
        prompt: &str,
        otherwise: Option<&str>,
    ) -> anyhow::Result<Result<(SecretBuf, usize), ExitCode>> {
        let found = self.unwrap_any(vault, only, prompt, otherwise)?;
        if let Ok((_, i)) = &found {
            // Informational (`protector list`, `info`): a failure to record
            // it never stops the command.
            let name = &vault.protectors()[*i].name;
            let _ = fscrypt_vault::usage::record_use(
                &vault.key_identifier(),
                name,
                fscrypt_vault::config::now_unix(),
            );
        }
        Ok(found)
    }

    /// [`UnlockArgs::unwrap`] without recording the use.
    fn unwrap_any(
        &self,
        vault: &Vault,
        only: Option<&str>,
        prompt: &str,
        otherwise: Option<&str>,
    ) -> anyhow::Result<Result<(SecretBuf, usize), ExitCode>> {
        if let Some(kind) = self.sealed_kind() {
            let options = self.device.unseal_options(self.age_identity.as_deref());
            let mut ui = seal::Prompter::new(
                self.device.pin_file.as_deref(),
                self.pass.extpass.as_deref(),
            );
            return seal::unwrap_sealed(vault, kind, only, &options, &mut ui);
        }
        let dir = vault.dir().display();
        let result = if let Some(path) = &self.key_file {
            let key = secret::read_key_file(path)?;
            vault.unwrap_with(&Secret::KeyFile(&key), only)
        } else if self.recovery_key {
            let rk = match secret::read_recovery_key(&format!("Recovery key for {dir}: "))? {
                Ok(rk) => rk,
                Err(code) => return Ok(Err(code)),
            };
            vault.unwrap_with(&Secret::RecoveryKey(&rk), only)
        } else {
            if !vault.has_passphrase() {
                let sealed: Vec<&str> = fscrypt_seal::Kind::ALL
                    .into_iter()
                    .filter(|k| vault.has_kind(seal::vault_kind(*k)))
                    .map(|k| match k {
                        fscrypt_seal::Kind::Tpm2 => " or --tpm2",
                        fscrypt_seal::Kind::Pkcs11 => " or --pkcs11",
                        fscrypt_seal::Kind::Fido2 => " or --fido2",
                        fscrypt_seal::Kind::Age => " or --age-identity FILE",
                    })
                    .collect();
                bail!(
                    "{dir} has no passphrase protector: unlock it with --key-file FILE or --recovery-key{}{}",
                    sealed.concat(),
                    otherwise.map(|o| format!(" ({o})")).unwrap_or_default()
                );
            }
            let pass = self.pass.read(prompt, false)?;
            secret::announce_passphrase_unlock(vault, only);
            vault.unwrap_with(&Secret::Passphrase(&pass), only)
        };
        match result {
            Ok(found) => Ok(Ok(found)),
            Err(e) if e.is_wrong_secret() => Ok(Err(secret::wrong_secret(&e))),
            Err(e) => Err(e.into()),
        }
    }
}
