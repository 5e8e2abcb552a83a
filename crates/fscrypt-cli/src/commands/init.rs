//! `fscrypt-rs init CIPHERDIR`: create a vault (random master key, root v2
//! policy, protectors) in an empty directory. Logic: `fscrypt_vault`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use fscrypt::EncryptionMode;
use fscrypt_vault::{ARGON2_TARGET, Argon2Choice, Argon2Params, InitOptions, Vault};

use crate::support::{seal, secret};

/// Contents encryption modes a vault may use (spec §1.1, §1.2).
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ContentsMode {
    /// AES-256-XTS (default).
    #[value(name = "aes-256-xts")]
    Aes256Xts,
    /// AES-128-CBC-ESSIV (pairs with aes-128-cts).
    #[value(name = "aes-128-cbc-essiv")]
    Aes128CbcEssiv,
    /// Adiantum (pairs with adiantum; allows --direct-key).
    Adiantum,
    /// SM4-XTS (pairs with sm4-cts).
    #[value(name = "sm4-xts")]
    Sm4Xts,
}

impl From<ContentsMode> for EncryptionMode {
    fn from(m: ContentsMode) -> Self {
        match m {
            ContentsMode::Aes256Xts => EncryptionMode::AES_256_XTS,
            ContentsMode::Aes128CbcEssiv => EncryptionMode::AES_128_CBC,
            ContentsMode::Adiantum => EncryptionMode::ADIANTUM,
            ContentsMode::Sm4Xts => EncryptionMode::SM4_XTS,
        }
    }
}

/// Filenames encryption modes a vault may use (spec §1.1, §1.2).
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum FilenamesMode {
    /// AES-256-CTS-CBC (default).
    #[value(name = "aes-256-cts")]
    Aes256Cts,
    /// AES-128-CTS-CBC.
    #[value(name = "aes-128-cts")]
    Aes128Cts,
    /// Adiantum.
    Adiantum,
    /// AES-256-HCTR2.
    #[value(name = "aes-256-hctr2")]
    Aes256Hctr2,
    /// SM4-CTS-CBC.
    #[value(name = "sm4-cts")]
    Sm4Cts,
}

impl From<FilenamesMode> for EncryptionMode {
    fn from(m: FilenamesMode) -> Self {
        match m {
            FilenamesMode::Aes256Cts => EncryptionMode::AES_256_CTS,
            FilenamesMode::Aes128Cts => EncryptionMode::AES_128_CTS,
            FilenamesMode::Adiantum => EncryptionMode::ADIANTUM,
            FilenamesMode::Aes256Hctr2 => EncryptionMode::AES_256_HCTR2,
            FilenamesMode::Sm4Cts => EncryptionMode::SM4_CTS,
        }
    }
}

/// Arguments of `fscrypt-rs init` (the help text is on the subcommand in
/// `main.rs`: protectors, where the passphrase comes from, its cost).
///
/// Protectors: a passphrase by default; `--key-file`/`--new-key-file`
/// instead, or both with `--passphrase`; and a recovery key, shown once,
/// unless `--no-recovery-key`. More can be added later with `fscrypt-rs
/// protector add`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The empty directory that will hold the encrypted files.
    pub cipherdir: PathBuf,
    /// Contents encryption mode.
    #[arg(long, value_enum, default_value = "aes-256-xts")]
    pub contents: ContentsMode,
    /// Filenames encryption mode.
    #[arg(long, value_enum, default_value = "aes-256-cts")]
    pub filenames: FilenamesMode,
    /// Pad encrypted filenames to a multiple of this many bytes (4, 8, 16, 32).
    #[arg(long, default_value_t = 32)]
    pub padding: usize,
    /// Data unit size in bytes (512, 1024, 2048, 4096); default: the block size (4096).
    #[arg(long)]
    pub data_unit_size: Option<u32>,
    /// Use DIRECT_KEY (Adiantum only): no per-file keys, the nonce goes into the IV.
    #[arg(long)]
    pub direct_key: bool,
    /// Refused: IV_INO_LBLK_64 needs stable inode numbers.
    #[arg(long)]
    pub iv_ino_lblk_64: bool,
    /// Refused: IV_INO_LBLK_32 needs stable inode numbers.
    #[arg(long)]
    pub iv_ino_lblk_32: bool,
    /// Protect the master key with this existing key file (32 or 64 raw bytes).
    #[arg(long, conflicts_with = "new_key_file")]
    pub key_file: Option<PathBuf>,
    /// Create this key file (64 random bytes, mode 0600) and protect the master key with it.
    #[arg(long)]
    pub new_key_file: Option<PathBuf>,
    /// Also add a passphrase protector when a key file is given.
    #[arg(long)]
    pub passphrase: bool,
    /// Do not make a recovery key (by default one is made and shown once:
    /// 56 characters to write down, which unlock the vault like the
    /// passphrase). Without it, the config stays in the version-1 format.
    #[arg(long)]
    pub no_recovery_key: bool,
    /// Write the vault's config (its policy and wrapped keys) to FILE, a
    /// new file outside CIPHERDIR, instead of into CIPHERDIR: a CIPHERDIR
    /// synced to a cloud then holds no wrapped key (gocryptfs -config).
    /// Every later command needs the same --config FILE (mount: also -o
    /// config=FILE); keep FILE safe and backed up: without it the vault
    /// cannot be opened.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where the passphrase comes from (implies a passphrase protector).
    #[command(flatten)]
    pub pass: secret::PassSource,
    /// Calibrate Argon2id so that one unlock takes about this many seconds
    /// on this machine (default 1; 0.05..=60, within the cost bound).
    #[arg(long, value_name = "SECONDS", conflicts_with = "argon2_passes")]
    pub kdf_time: Option<f64>,
    /// Argon2id memory in MiB (1..=4096; default: 256, less on a slow
    /// machine). Alone: the passes are calibrated for this memory.
    #[arg(long, value_name = "MiB")]
    pub argon2_memory: Option<u32>,
    /// Argon2id passes (with --argon2-memory: no calibration at all).
    #[arg(long, value_name = "N", requires = "argon2_memory")]
    pub argon2_passes: Option<u32>,
    /// Make a vault without integrity (data format 2, the format of
    /// earlier versions): contents and names are encrypted but not
    /// authenticated, so changed, moved, truncated or rolled-back backing
    /// files are not detected. A little faster. Default: data format 3,
    /// authenticated.
    #[arg(long, conflicts_with = "integrity")]
    pub no_integrity: bool,
    /// Make an authenticated vault (data format 3, `docs/vault-format.md`
    /// §4b): every data unit, size, name and symlink target is tagged, a
    /// file is bound to its name, and this machine notices a file put back
    /// to an earlier version. A read of tampered data fails with EIO.
    /// The default; the flag only says so.
    #[arg(long)]
    pub integrity: bool,
    /// Reverse mode (gocryptfs -reverse): CIPHERDIR is a plaintext
    /// directory to back up, which keeps its files; the config is written
    /// into it as .fscrypt-rs.reverse.json (hidden from the view), and
    /// `fscrypt-rs mount --reverse` then shows it as an authenticated
    /// vault to copy (README "Encrypted backups: reverse mode").
    #[arg(long, conflicts_with = "config")]
    pub reverse: bool,
    /// Protect the master key with this machine's TPM2 (sealed under a
    /// PCR policy: --pcrs, --pin, --tcti). A recovery key is made too
    /// unless --no-recovery-key; no passphrase unless --passphrase.
    #[arg(long, conflicts_with_all = ["pkcs11", "fido2"])]
    pub tpm2: bool,
    /// Protect the master key with a key on a PKCS#11 token (--module,
    /// --token, --pin-file). A recovery key is made too.
    #[arg(long, conflicts_with = "fido2")]
    pub pkcs11: bool,
    /// Protect the master key with a FIDO2 security key (--device). A
    /// recovery key is made too.
    #[arg(long)]
    pub fido2: bool,
    /// How to seal (--pcrs, --pin; --recipient/--recipients-file make an
    /// age protector).
    #[command(flatten)]
    pub seal: seal::SealArgs,
    /// Where the device is.
    #[command(flatten)]
    pub device: seal::DeviceArgs,
}

/// The Argon2id cost `init` asked for on its command line.
#[derive(Debug, Clone, Copy, PartialEq)]
enum CostChoice {
    /// Calibrate to this time, with this memory in KiB if given.
    Calibrate(Duration, Option<u32>),
    /// These parameters exactly.
    Fixed(Argon2Params),
}

impl Args {
    /// The cost asked for, checked: a time within the calibration's range,
    /// memory and passes within the bounds a vault accepts.
    fn cost_choice(&self) -> anyhow::Result<CostChoice> {
        let memory_kib = match self.argon2_memory {
            None => None,
            Some(mib) if (1..=4096).contains(&mib) => Some(mib * 1024),
            Some(mib) => anyhow::bail!("--argon2-memory {mib} is out of range: give 1..=4096 MiB"),
        };
        if let (Some(m_cost_kib), Some(t_cost)) = (memory_kib, self.argon2_passes) {
            let params = Argon2Params {
                m_cost_kib,
                t_cost,
                p_cost: 1,
            };
            params.validate().map_err(|e| {
                anyhow::anyhow!(
                    "--argon2-memory {} --argon2-passes {t_cost}: {e}; choose less memory or fewer passes",
                    m_cost_kib / 1024
                )
            })?;
            return Ok(CostChoice::Fixed(params));
        }
        let target = match self.kdf_time {
            None => ARGON2_TARGET,
            Some(s) if s.is_finite() && (0.05..=60.0).contains(&s) => Duration::from_secs_f64(s),
            Some(s) => anyhow::bail!("--kdf-time {s} is out of range: give 0.05..=60 seconds"),
        };
        Ok(CostChoice::Calibrate(target, memory_kib))
    }

    /// The sealed protectors asked for: the device flag's kind, and age
    /// when recipients are given.
    fn sealed_kinds(&self) -> Vec<fscrypt_seal::Kind> {
        use fscrypt_seal::Kind;
        let age = !self.seal.recipient.is_empty() || !self.seal.recipients_file.is_empty();
        [
            (self.tpm2, Kind::Tpm2),
            (self.pkcs11, Kind::Pkcs11),
            (self.fido2, Kind::Fido2),
            (age, Kind::Age),
        ]
        .into_iter()
        .filter_map(|(on, kind)| on.then_some(kind))
        .collect()
    }

    /// True if a passphrase option was given (`--passphrase`, `--passfile`,
    /// `--extpass`, or a cost option, which only a passphrase has).
    fn wants_passphrase(&self) -> bool {
        self.passphrase
            || self.pass.is_given()
            || self.kdf_time.is_some()
            || self.argon2_memory.is_some()
    }
}

/// Runs `fscrypt-rs init`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let log2_data_unit_size = match args.data_unit_size {
        None => 0,
        Some(n) if n.is_power_of_two() => n.trailing_zeros() as u8,
        Some(n) => anyhow::bail!("--data-unit-size {n} is not a power of two"),
    };
    let mut opts = InitOptions {
        contents_mode: args.contents.into(),
        filenames_mode: args.filenames.into(),
        padding: args.padding,
        log2_data_unit_size,
        direct_key: args.direct_key,
        iv_ino_lblk_64: args.iv_ino_lblk_64,
        iv_ino_lblk_32: args.iv_ino_lblk_32,
        recovery_key: !args.no_recovery_key,
        format: if args.no_integrity {
            fscrypt_vault::layout::Format::V2
        } else if args.integrity {
            fscrypt_vault::layout::Format::V3
        } else {
            fscrypt_vault::layout::Format::LATEST
        },
        ..InitOptions::default()
    };
    // Refuse a bad policy or cost before asking for any secret or creating
    // a key file.
    opts.policy(fscrypt::KeyIdentifier::default())?;
    let cost = args.cost_choice()?;
    let meta = std::fs::metadata(&args.cipherdir)
        .with_context(|| format!("{}", args.cipherdir.display()))?;
    anyhow::ensure!(
        meta.is_dir(),
        "{} is not a directory",
        args.cipherdir.display()
    );
    if args.reverse {
        if args.no_integrity {
            return Err(fscrypt_vault::Error::ReverseFormat.into());
        }
        Vault::check_init_reverse(&args.cipherdir)?;
    } else if Vault::config_path(&args.cipherdir)
        .symlink_metadata()
        .is_ok()
    {
        anyhow::bail!(
            "{} is already a vault: refusing to overwrite its config",
            args.cipherdir.display()
        );
    }
    if let Some(config) = &args.config
        && config.symlink_metadata().is_ok()
    {
        anyhow::bail!(
            "config file {} already exists: refusing to overwrite it; choose a new path",
            config.display()
        );
    }

    // Everything else init_with refuses about the directory (not empty, a
    // config path inside it), before a passphrase is asked for or Argon2id
    // calibrated (issue 26 item 5).
    if !args.reverse {
        Vault::check_init_target(&args.cipherdir, args.config.as_deref())?;
    }

    // The sealed protector's options, checked before anything is asked or
    // made (flags of another kind are refused).
    let kinds = args.sealed_kinds();
    let seal_options = match kinds.as_slice() {
        [] if args.seal != seal::SealArgs::default()
            || args.device != seal::DeviceArgs::default() =>
        {
            anyhow::bail!(
                "--pcrs, --pin, --tcti, --module, --token, --pin-file and --device go with --tpm2, --pkcs11 or --fido2"
            )
        }
        [] => None,
        [kind] => Some(args.seal.options(*kind, &args.device)?),
        _ => anyhow::bail!(
            "init makes one sealed protector: give one of --tpm2, --pkcs11, --fido2, --recipient, and add more later with `fscrypt-rs protector add`"
        ),
    };
    if let Some(options) = &seal_options {
        let mut ui = seal::Prompter::new(
            args.device.pin_file.as_deref(),
            args.pass.extpass.as_deref(),
        );
        let (secret, sealed) = seal::seal_new(options, &mut ui)?;
        opts.sealed.push(fscrypt_vault::SealedInit {
            kind: seal::vault_kind(options.kind()),
            sealed: sealed.to_json(),
            secret: fscrypt_crypto::SecretBuf::from_slice(secret.as_bytes()),
        });
    }

    let mut made_key_file = None;
    if let Some(path) = &args.key_file {
        opts.key_file = Some(secret::read_key_file(path)?);
    } else if let Some(path) = &args.new_key_file {
        opts.key_file = Some(secret::generate_key_file(path)?);
        made_key_file = Some(path.clone());
    }
    let mut estimate = None;
    let result = (|| {
        if (opts.key_file.is_none() && opts.sealed.is_empty()) || args.wants_passphrase() {
            opts.passphrase = Some(args.pass.read("New passphrase: ", true)?);
            let params = match (cost, Argon2Params::from_env()?) {
                (CostChoice::Fixed(params), _) => {
                    estimate = Some(params.estimate());
                    params
                }
                (CostChoice::Calibrate(..), Some(params)) => {
                    eprintln!(
                        "fscrypt-rs: warning: weak Argon2id costs from {} (meant for tests)",
                        fscrypt_vault::cost::ARGON2_ENV
                    );
                    params
                }
                (CostChoice::Calibrate(target, memory_kib), None) => {
                    eprintln!(
                        "fscrypt-rs: measuring Argon2id on this machine (aiming at {} per unlock)...",
                        secret::format_seconds(target)
                    );
                    let (params, measured) = Argon2Params::calibrate(target, memory_kib)?;
                    estimate = Some(measured);
                    params
                }
            };
            secret::announce_derivation(params.work_kib());
            opts.argon2 = Argon2Choice::Fixed(params);
        }
        if args.reverse {
            return Ok(Vault::init_reverse(&args.cipherdir, &opts)?);
        }
        Ok::<_, anyhow::Error>(Vault::init_with(
            &args.cipherdir,
            args.config.as_deref(),
            &opts,
        )?)
    })();
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            if let Some(path) = made_key_file {
                let _ = std::fs::remove_file(path);
            }
            return Err(e);
        }
    };
    let p = &report.policy;
    if args.reverse {
        println!(
            "Prepared {} for reverse mode (config {}; mount the encrypted view with \
             `fscrypt-rs mount --reverse`)",
            args.cipherdir.display(),
            fscrypt_vault::reverse::REVERSE_CONFIG_NAME
        );
    } else {
        println!("Created vault {}", args.cipherdir.display());
    }
    println!("  key identifier: {}", report.key_identifier);
    if let Some(config) = &args.config {
        println!(
            "  config: {} (not in the vault: give it with --config to every command; back it up)",
            config.display()
        );
    }
    println!(
        "  policy: v2, contents {}, filenames {}, padding {}, data unit {}{}",
        p.contents_mode,
        p.filenames_mode,
        p.flags.padding(),
        match p.log2_data_unit_size {
            0 => "= block size".to_owned(),
            n => format!("{} bytes", 1u32 << n),
        },
        if p.flags.direct_key() {
            ", DIRECT_KEY"
        } else {
            ""
        }
    );
    if let Some((params, time)) = report.argon2 {
        // The calibration's median if there was one, else this derivation.
        println!(
            "  passphrase protector: Argon2id m={} KiB t={} p={} (about {} per unlock here)",
            params.m_cost_kib,
            params.t_cost,
            params.p_cost,
            secret::format_seconds(estimate.unwrap_or(time)),
        );
    }
    if let Some(path) = args.key_file.as_ref().or(args.new_key_file.as_ref()) {
        println!("  key-file protector: {}", path.display());
    }
    for s in &opts.sealed {
        let details = fscrypt_seal::Sealed::from_json(&s.sealed)
            .map(|r| seal::describe_sealed(&r))
            .unwrap_or_default();
        println!("  {} protector: {details}", s.kind);
    }
    if let Some(key) = &report.recovery_key {
        secret::show_recovery_key(key);
    }
    Ok(ExitCode::SUCCESS)
}
