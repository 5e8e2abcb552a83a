//! `fscrypt-rs set-policy`: set an encryption policy on an empty directory
//! (FS_IOC_SET_ENCRYPTION_POLICY, spec §10.1).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use fscrypt::{EncryptionMode, Policy, PolicyFlags, PolicyV1, PolicyV2};
use fscrypt_linux::keyring::KeySpec;
use fscrypt_linux::policy;

use crate::support::kernel;

/// Arguments of `fscrypt-rs set-policy`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Set an encryption policy on an empty directory",
    long_about = "Set an encryption policy on the empty directory DIR. KEY is a key \
                  identifier (32 hex digits, v2 policy; add the key first with `add-key`) or, \
                  with --v1, a key descriptor (16 hex digits).\n\nDefaults: AES-256-XTS \
                  contents, AES-256-CTS filenames, padding 32, v2, data unit = filesystem \
                  block. The kernel decides what it accepts; its refusal is reported with the \
                  policy printed."
)]
pub struct Args {
    /// Key identifier (v2) or descriptor (with --v1).
    pub key: KeySpec,
    /// The empty directory.
    pub dir: PathBuf,
    /// Contents mode (AES-256-XTS, AES-128-CBC-ESSIV, Adiantum, SM4-XTS, or a number).
    #[arg(long, value_parser = kernel::parse_mode, default_value = "AES-256-XTS")]
    pub contents: EncryptionMode,
    /// Filenames mode (AES-256-CTS, AES-128-CTS, Adiantum, AES-256-HCTR2, SM4-CTS, or a number).
    #[arg(long, value_parser = kernel::parse_mode, default_value = "AES-256-CTS")]
    pub filenames: EncryptionMode,
    /// Filename padding in bytes.
    #[arg(long, default_value_t = 32, value_parser = parse_padding)]
    pub padding: usize,
    /// DIRECT_KEY flag (Adiantum only).
    #[arg(long)]
    pub direct_key: bool,
    /// IV_INO_LBLK_64 flag (v2, needs `-O stable_inodes`).
    #[arg(long)]
    pub iv_ino_lblk_64: bool,
    /// IV_INO_LBLK_32 flag (v2, needs `-O stable_inodes`).
    #[arg(long)]
    pub iv_ino_lblk_32: bool,
    /// Data unit size in bytes (v2, Linux 6.7+; power of two, 512..=block size).
    #[arg(long, value_name = "BYTES")]
    pub data_unit_size: Option<u32>,
    /// Make a v1 policy (KEY is then a descriptor).
    #[arg(long)]
    pub v1: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_padding(s: &str) -> Result<usize, String> {
    match s {
        "4" => Ok(4),
        "8" => Ok(8),
        "16" => Ok(16),
        "32" => Ok(32),
        _ => Err(format!("padding must be 4, 8, 16 or 32, not {s:?}")),
    }
}

/// Build the policy the arguments describe (no kernel rules applied here:
/// the kernel is the authority on what it accepts).
pub fn build_policy(args: &Args) -> anyhow::Result<Policy> {
    let mut flags = match PolicyFlags(0).with_padding(args.padding) {
        Some(f) => f,
        None => bail!("--padding must be 4, 8, 16 or 32"),
    };
    if args.direct_key {
        flags = flags | PolicyFlags::DIRECT_KEY;
    }
    if args.iv_ino_lblk_64 {
        flags = flags | PolicyFlags::IV_INO_LBLK_64;
    }
    if args.iv_ino_lblk_32 {
        flags = flags | PolicyFlags::IV_INO_LBLK_32;
    }
    match (args.v1, args.key) {
        (true, KeySpec::Descriptor(d)) => {
            if args.data_unit_size.is_some() {
                bail!("--data-unit-size needs a v2 policy (v1 always uses the block size)");
            }
            Ok(Policy::V1(PolicyV1 {
                contents_mode: args.contents,
                filenames_mode: args.filenames,
                flags,
                master_key_descriptor: d,
            }))
        }
        (false, KeySpec::Identifier(i)) => {
            let log2 = match args.data_unit_size {
                None => 0,
                Some(n) if n.is_power_of_two() && n >= 2 => n.trailing_zeros() as u8,
                Some(n) => bail!("--data-unit-size {n} is not a power of two"),
            };
            Ok(Policy::V2(PolicyV2 {
                contents_mode: args.contents,
                filenames_mode: args.filenames,
                flags,
                log2_data_unit_size: log2,
                master_key_identifier: i,
            }))
        }
        (true, KeySpec::Identifier(_)) => {
            bail!("--v1 needs a key descriptor (16 hex digits), not an identifier")
        }
        (false, KeySpec::Descriptor(_)) => {
            bail!(
                "{} is a v1 key descriptor: add --v1, or use a v2 key identifier (32 hex digits)",
                args.key
            )
        }
    }
}

/// Runs `fscrypt-rs set-policy`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json;
    kernel::json_errors(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    let p = build_policy(&args)?;
    match policy::set_policy(&args.dir, &p) {
        Ok(()) => {
            if args.json {
                let mut v = kernel::policy_json(&p);
                v["ok"] = true.into();
                kernel::print_json(&v)?;
            } else {
                kernel::out(format_args!(
                    "{}: {}\n",
                    args.dir.display(),
                    policy::describe(&p)
                ))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => kernel::fail(args.json, &e),
    }
}
