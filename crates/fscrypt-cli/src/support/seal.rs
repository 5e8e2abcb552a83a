//! Sealed protectors on the command line (issue 25): the options that
//! say where a device is ([`DeviceArgs`]: `--tcti`, `--module`, `--token`,
//! `--pin-file`, `--device`), how a new protector is sealed
//! ([`SealArgs`]: `--pcrs`, `--pin`, `--recipient`, `--recipients-file`),
//! the PIN prompts ([`Prompter`]), and the unlock loop that asks each
//! protector of a kind's device in turn ([`unwrap_sealed`]).
//!
//! The sealing itself is `fscrypt_seal`; the wrapping of the master key
//! `fscrypt_vault` ([`fscrypt_vault::Secret::Sealed`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;
use fscrypt_crypto::SecretBuf;
use fscrypt_seal::{Interaction, Kind, SealOptions, Sealed, UnsealOptions};
use fscrypt_vault::config::ProtectorRecord;
use fscrypt_vault::{ProtectorKind, Vault};
use zeroize::Zeroizing;

use crate::support::secret;

/// Silences the TSS libraries' own `ERROR:esys:...` lines on stderr (a
/// wrong TPM PIN would print three of them before our one-line reason),
/// unless the user set `TSS2_LOG` to see them. Call first thing in `main`.
#[allow(unsafe_code)]
pub fn quiet_tss_logs() {
    if std::env::var_os("TSS2_LOG").is_none() {
        // SAFETY: called at the start of main, before any thread exists,
        // so no other thread can read the environment concurrently.
        unsafe { std::env::set_var("TSS2_LOG", "all+none") };
    }
}

/// Where the device of a sealed protector is, for sealing a new one
/// (`protector add`, `init`, `encrypt --source`) and for unlocking
/// (`mount --tpm2`, ...). Unlocking uses what the protector's record
/// remembers when these are not given.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceArgs {
    /// TPM2: the TCTI (`device:/dev/tpmrm0`, `swtpm:host=127.0.0.1,port=2321`);
    /// default: $TPM2TOOLS_TCTI, then $TCTI, then /dev/tpmrm0.
    #[arg(long, value_name = "SPEC")]
    pub tcti: Option<String>,
    /// PKCS#11: the token's module (e.g. /usr/lib/softhsm/libsofthsm2.so,
    /// opensc-pkcs11.so).
    #[arg(long, value_name = "SO")]
    pub module: Option<PathBuf>,
    /// PKCS#11: the token's label.
    #[arg(long, value_name = "LABEL")]
    pub token: Option<String>,
    /// The device's PIN (TPM2 with --pin, PKCS#11, FIDO2): the first line
    /// of FILE instead of the terminal (or --extpass CMD).
    #[arg(long, value_name = "FILE")]
    pub pin_file: Option<PathBuf>,
    /// FIDO2: the authenticator's device (default: the only one present).
    #[arg(long, value_name = "PATH")]
    pub device: Option<PathBuf>,
}

impl DeviceArgs {
    /// The unseal options these flags give, with the age identity file.
    pub fn unseal_options(&self, age_identity: Option<&Path>) -> UnsealOptions {
        let mut o = UnsealOptions::default();
        o.tpm2.tcti = self.tcti.clone();
        o.pkcs11.module = self.module.clone();
        o.pkcs11.token = self.token.clone();
        o.fido2.device = self.device.clone();
        o.age.identity = age_identity.map(Path::to_path_buf);
        o
    }
}

/// How a new sealed protector is sealed (besides [`DeviceArgs`]).
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct SealArgs {
    /// TPM2: seal to these PCRs of the SHA-256 bank (default 7, the
    /// Secure Boot state); a firmware or boot change to one of them
    /// refuses the unlock until `protector reseal`.
    #[arg(long, value_name = "N[,N..]", value_delimiter = ',')]
    pub pcrs: Vec<u8>,
    /// TPM2: also require a PIN (asked twice; wrong PINs count toward the
    /// TPM's dictionary-attack lockout).
    #[arg(long)]
    pub pin: bool,
    /// PKCS#11: seal with this existing key on the token (its CKA_LABEL:
    /// an AES key for key wrap, or an RSA private key for RSA-OAEP);
    /// default: a new non-extractable AES-256 key made on the token.
    #[arg(long, value_name = "LABEL")]
    pub key_label: Option<String>,
    /// age: an X25519 recipient (`age1...`, from `age-keygen -y`);
    /// repeatable.
    #[arg(long, value_name = "AGE1...")]
    pub recipient: Vec<String>,
    /// age: a file of recipients, one per line (`#` comments), as age -R
    /// reads; repeatable.
    #[arg(long, value_name = "FILE")]
    pub recipients_file: Vec<PathBuf>,
}

impl SealArgs {
    /// The seal options for `kind`, refusing flags of another kind.
    ///
    /// # Errors
    /// A flag that does not apply to `kind`, a missing `--module`/`--token`
    /// (pkcs11) or recipient (age), an unreadable recipients file.
    // The seal modules' options may have more fields than the flags set.
    #[allow(clippy::needless_update)]
    pub fn options(&self, kind: Kind, device: &DeviceArgs) -> anyhow::Result<SealOptions> {
        let foreign = |flag: &str, for_kind: &str| -> anyhow::Result<SealOptions> {
            bail!("{flag} is for {for_kind} protectors, not {kind}")
        };
        if kind != Kind::Tpm2 {
            if !self.pcrs.is_empty() {
                return foreign("--pcrs", "tpm2");
            }
            if self.pin {
                return foreign("--pin", "tpm2");
            }
            if device.tcti.is_some() {
                return foreign("--tcti", "tpm2");
            }
        }
        if kind != Kind::Pkcs11
            && (device.module.is_some() || device.token.is_some() || self.key_label.is_some())
        {
            return foreign("--module, --token and --key-label", "pkcs11");
        }
        if kind != Kind::Fido2 && device.device.is_some() {
            return foreign("--device", "fido2");
        }
        if kind != Kind::Age && (!self.recipient.is_empty() || !self.recipients_file.is_empty()) {
            return foreign("--recipient and --recipients-file", "age");
        }
        Ok(match kind {
            Kind::Tpm2 => {
                let mut o = fscrypt_seal::tpm2::SealOptions {
                    tcti: device.tcti.clone(),
                    pin: self.pin,
                    ..Default::default()
                };
                o.pcrs = if self.pcrs.is_empty() {
                    vec![7]
                } else {
                    self.pcrs.clone()
                };
                SealOptions::Tpm2(o)
            }
            Kind::Pkcs11 => {
                let (Some(module), Some(token)) = (&device.module, &device.token) else {
                    bail!(
                        "a pkcs11 protector needs --module SO (the token's PKCS#11 library) and --token LABEL"
                    );
                };
                SealOptions::Pkcs11(fscrypt_seal::pkcs11::SealOptions {
                    module: module.clone(),
                    token: token.clone(),
                    key: self.key_label.clone(),
                })
            }
            Kind::Fido2 => SealOptions::Fido2(fscrypt_seal::fido2::SealOptions {
                device: device.device.clone(),
                ..Default::default()
            }),
            Kind::Age => {
                let mut recipients = self.recipient.clone();
                for path in &self.recipients_file {
                    recipients.extend(fscrypt_seal::age::read_recipients_file(path)?);
                }
                if recipients.is_empty() {
                    bail!("an age protector needs --recipient age1... or --recipients-file FILE");
                }
                SealOptions::Age(fscrypt_seal::age::SealOptions {
                    recipients,
                    ..Default::default()
                })
            }
        })
    }
}

/// The vault's kind for a sealed kind.
pub fn vault_kind(kind: Kind) -> ProtectorKind {
    match kind {
        Kind::Tpm2 => ProtectorKind::Tpm2,
        Kind::Pkcs11 => ProtectorKind::Pkcs11,
        Kind::Fido2 => ProtectorKind::Fido2,
        Kind::Age => ProtectorKind::Age,
    }
}

/// PINs from `--pin-file`, `--extpass`, the terminal (no echo) or one
/// line of stdin; notices on stderr.
pub struct Prompter {
    source: secret::PassSource,
}

impl Prompter {
    /// PINs from `pin_file`, else `extpass`'s output, else the terminal.
    pub fn new(pin_file: Option<&Path>, extpass: Option<&str>) -> Prompter {
        Prompter {
            source: secret::PassSource {
                passfile: pin_file.map(Path::to_path_buf),
                extpass: extpass.map(str::to_owned),
            },
        }
    }
}

impl Interaction for Prompter {
    fn pin(&mut self, what: &str, confirm: bool) -> Result<Zeroizing<String>, fscrypt_seal::Error> {
        let buf: SecretBuf = self
            .source
            .read(&format!("{what}: "), confirm)
            .map_err(|e| fscrypt_seal::Error::Io(format!("{what}: {e:#}")))?;
        let text = std::str::from_utf8(buf.as_bytes())
            .map_err(|_| fscrypt_seal::Error::Invalid(format!("{what} is not UTF-8 text")))?;
        Ok(Zeroizing::new(text.to_owned()))
    }

    fn notice(&mut self, message: &str) {
        eprintln!("fscrypt-rs: {message}");
    }
}

/// A new random secret sealed as `options` say: the secret and the
/// record to store.
///
/// # Errors
/// The device's refusal or absence, as one line.
pub fn seal_new(
    options: &SealOptions,
    ui: &mut dyn Interaction,
) -> anyhow::Result<(fscrypt_seal::Secret, Sealed)> {
    let secret = fscrypt_seal::Secret::random()?;
    let sealed = fscrypt_seal::seal(options, &secret, ui)?;
    Ok((secret, sealed))
}

/// The sealed record of a vault protector, checked against its kind.
///
/// # Errors
/// A record that does not parse or is of another kind.
pub fn record_of(p: &fscrypt_vault::Protector) -> anyhow::Result<Option<Sealed>> {
    let ProtectorRecord::Sealed { kind, sealed, .. } = &p.record else {
        return Ok(None);
    };
    let s = Sealed::from_json(sealed)?;
    if vault_kind(s.kind()) != *kind {
        bail!(
            "protector {:?} is a {kind} protector holding a {} record: the config was edited; remove it",
            p.name,
            s.kind()
        );
    }
    Ok(Some(s))
}

/// Unwraps `vault`'s master key with its `kind` protectors (or only the
/// one named `only`): each one's device or identity is asked in config
/// order until one opens the key. Returns the key and the protector's
/// index, or, when every device refused (wrong PIN, changed PCRs, another
/// identity), the refusals printed and exit code
/// [`secret::EXIT_WRONG_SECRET`].
///
/// # Errors
/// No protector of the kind; when none opened and not every one was a
/// wrong secret, every refusal in one line (a device that cannot be
/// reached, a malformed record).
pub fn unwrap_sealed(
    vault: &Vault,
    kind: Kind,
    only: Option<&str>,
    options: &UnsealOptions,
    ui: &mut dyn Interaction,
) -> anyhow::Result<Result<(SecretBuf, usize), ExitCode>> {
    let want = vault_kind(kind);
    let candidates: Vec<usize> = vault
        .protectors()
        .iter()
        .enumerate()
        .filter(|(_, p)| p.record.protector_kind() == want && only.is_none_or(|n| n == p.name))
        .map(|(i, _)| i)
        .collect();
    if candidates.is_empty() {
        if let Some(name) = only {
            return Err(fscrypt_vault::Error::UnknownProtector(name.to_owned()).into());
        }
        bail!(
            "{} has no {kind} protector: `fscrypt-rs protector list` shows what it has",
            vault.dir().display()
        );
    }
    let mut refusals = Vec::new();
    let mut wrong_only = true;
    for i in candidates {
        let p = &vault.protectors()[i];
        // A malformed record is one refusal among others: another
        // protector of the kind may still open the vault.
        let sealed = match record_of(p) {
            Ok(Some(s)) => s,
            Ok(None) => continue,
            Err(e) => {
                wrong_only = false;
                refusals.push(format!("{e:#}"));
                continue;
            }
        };
        let secret = match fscrypt_seal::unseal(&sealed, options, ui) {
            Ok(s) => s,
            Err(e) => {
                wrong_only &= e.is_wrong_secret();
                refusals.push(format!("protector {:?}: {e}", p.name));
                continue;
            }
        };
        let given = fscrypt_vault::Secret::Sealed {
            kind: want,
            secret: secret.as_bytes(),
        };
        match vault.unwrap_with(&given, Some(&p.name)) {
            Ok(found) => return Ok(Ok(found)),
            Err(e) if e.is_wrong_secret() => refusals.push(format!("protector {:?}: {e}", p.name)),
            Err(e) => return Err(e.into()),
        }
    }
    if wrong_only {
        for r in &refusals {
            eprintln!("fscrypt-rs: {r}");
        }
        return Ok(Err(ExitCode::from(secret::EXIT_WRONG_SECRET)));
    }
    bail!("{}", refusals.join("; "))
}

/// A sealed record's (field, value) pairs as `field=value` words.
pub fn describe_sealed(sealed: &Sealed) -> String {
    sealed
        .describe()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What `protector list` and `info` show of a protector's sealed record:
/// its (field, value) pairs as `field=value` words, or `-` for a
/// protector that is not sealed.
pub fn describe(p: &fscrypt_vault::Protector) -> String {
    match record_of(p) {
        Ok(Some(s)) => describe_sealed(&s),
        Ok(None) => "-".to_owned(),
        Err(e) => format!("(unreadable: {e})"),
    }
}
