//! `fscrypt-rs init CIPHERDIR`: create a vault (random master key, root v2
//! policy, protectors) in an empty directory. Logic: `fscrypt_vault`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use fscrypt::EncryptionMode;
use fscrypt_vault::{InitOptions, Vault};

use super::secret;

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

/// Arguments of `fscrypt-rs init`.
///
/// Protectors: a passphrase by default; `--key-file`/`--new-key-file`
/// instead, or both with `--passphrase`; and a recovery key, shown once,
/// unless `--no-recovery-key`. More can be added later with `fscrypt-rs
/// protector add`. The passphrase is read from the
/// terminal (no echo, asked twice) or, when stdin is not a terminal, as one
/// line from stdin.
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
        ..InitOptions::default()
    };
    // Refuse a bad policy before asking for any secret or creating a key file.
    opts.policy(fscrypt::KeyIdentifier::default())?;
    let meta = std::fs::metadata(&args.cipherdir)
        .with_context(|| format!("{}", args.cipherdir.display()))?;
    anyhow::ensure!(
        meta.is_dir(),
        "{} is not a directory",
        args.cipherdir.display()
    );
    if Vault::config_path(&args.cipherdir)
        .symlink_metadata()
        .is_ok()
    {
        anyhow::bail!(
            "{} is already a vault: refusing to overwrite its config",
            args.cipherdir.display()
        );
    }

    let mut made_key_file = None;
    if let Some(path) = &args.key_file {
        opts.key_file = Some(secret::read_key_file(path)?);
    } else if let Some(path) = &args.new_key_file {
        opts.key_file = Some(secret::generate_key_file(path)?);
        made_key_file = Some(path.clone());
    }
    if opts.key_file.is_none() || args.passphrase {
        opts.passphrase = Some(secret::read_passphrase("New passphrase: ", true)?);
        if fscrypt_vault::Argon2Params::from_env()?.is_some() {
            eprintln!(
                "fscrypt-rs: warning: weak Argon2id costs from {} (meant for tests)",
                fscrypt_vault::cost::ARGON2_ENV
            );
        } else {
            eprintln!(
                "fscrypt-rs: measuring Argon2id on this machine (aiming at 1 s per unlock)..."
            );
        }
    }

    let report = match Vault::init(&args.cipherdir, &opts) {
        Ok(r) => r,
        Err(e) => {
            if let Some(path) = made_key_file {
                let _ = std::fs::remove_file(path);
            }
            return Err(e.into());
        }
    };
    let p = &report.policy;
    println!("Created vault {}", args.cipherdir.display());
    println!("  key identifier: {}", report.key_identifier);
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
        println!(
            "  passphrase protector: Argon2id m={} KiB t={} p={} ({} ms here)",
            params.m_cost_kib,
            params.t_cost,
            params.p_cost,
            time.as_millis()
        );
    }
    if let Some(path) = args.key_file.as_ref().or(args.new_key_file.as_ref()) {
        println!("  key-file protector: {}", path.display());
    }
    if let Some(key) = &report.recovery_key {
        secret::show_recovery_key(key);
    }
    Ok(ExitCode::SUCCESS)
}
